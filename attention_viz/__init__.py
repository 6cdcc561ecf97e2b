"""attention-viz: capture and show what every attention head of a Transformer does with a sentence.

Importing the package changes nothing process-wide; entry points call
:func:`attention_viz.runtime.settings.apply_process_settings` first.
"""

# attention_viz.api, imported on first use: `import attention_viz` stays light
_API = ("run", "show", "export", "patch", "init_notebook")


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
