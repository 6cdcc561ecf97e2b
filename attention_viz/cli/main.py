"""The command line: ``python -m attention_viz {run,export,models}``. Errors are one line on stderr and a
non-zero exit, never a traceback.

Parsing and checking the arguments imports neither torch nor a model (each loads when a command
runs): a mistyped flag, an unknown model or a bad --out is answered at once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import attribute, caption, circuit, heads, patch
from .common import Parser, add_placement_options, fail, missing_folder, placement
from ..errors import ModelError
from ..atlas import cli as atlas_cli
from ..backends.registry import DEFAULT_MODEL, MODELS, availability, load_backend
from ..core.names import KINDS
from ..inputs.text_file import read_text_path

# figures/views.py's VIEWS (which imports plotly) and the every-head page: named here so that a run,
# which draws nothing, loads no plotting library (tests/test_bare_imports.py checks they agree)
EXPORT_VIEWS = ("head", "grid", "rollout", "heads")


def _kinds(value: str) -> tuple[str, ...]:
    kinds = KINDS if value == "all" else tuple(k.strip() for k in value.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"kinds must be 'all' or a comma list of {', '.join(KINDS)}")
    return kinds


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m attention_viz", description="Capture and export Transformer attention.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    run = commands.add_parser("run", help="run a model on a text and save every captured array (.npz)")
    run.add_argument("--model", default=DEFAULT_MODEL, help="model name (see `models`) or hf:<id or folder>")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the input sentence")
    source.add_argument("--text-file", metavar="FILE",
                        help="read the input from a text file (UTF-8, or UTF-16 with a byte-order mark)")
    run.add_argument("--target", help="target sentence for teacher forcing (encoder–decoder models)")
    run.add_argument("--kinds", type=_kinds, default=("pattern",), help="'all' or e.g. pattern,scores,q")
    heads.add_run_options(run)
    add_placement_options(run)
    run.add_argument("--out", required=True, help="where to write the .npz")

    export = commands.add_parser("export", help="write one view as a standalone HTML file (works offline)")
    export.add_argument("--model", default=DEFAULT_MODEL, help="model name (see `models`) or hf:<id or folder>")
    export.add_argument("--text", required=True, help="the input sentence")
    export.add_argument("--target", help="target sentence for teacher forcing (encoder–decoder models)")
    export.add_argument("--view", required=True, choices=EXPORT_VIEWS,
                        help="which figure; heads: every layer and head in one interactive page")
    export.add_argument("--attention", choices=["encoder", "decoder", "cross"],
                        help="which attention of an encoder–decoder model (default: the first)")
    export.add_argument("--layer", type=int, default=0)
    export.add_argument("--head", default="0", help="a head index, mean or max")
    add_placement_options(export)
    export.add_argument("--out", required=True, help="where to write the .html")

    caption.add_parser(commands)
    atlas_cli.add_parser(commands)
    heads.add_parser(commands)
    patch.add_parser(commands)
    attribute.add_parser(commands)
    circuit.add_parser(commands)
    commands.add_parser("models", help="list the models and whether they are available offline")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    if args.text_file is not None:
        args.text = read_text_path(args.text_file)
    if not args.text.strip():
        return fail("--text is empty: give a sentence")
    if not args.out.endswith(".npz"):
        return fail("--out must end in .npz")
    if problem := missing_folder(args.out):
        return fail(problem)
    backend = load_backend(args.model, **placement(args))
    result = heads.run(backend, args)
    result.save_npz(args.out)
    dropped = result.meta.get("dropped", 0)
    note = f" ({dropped} tokens beyond the model's {backend.max_tokens} were dropped)" if dropped else ""
    print(f"wrote {args.out}: {len(result.arrays)} arrays over {len(result.tokens)} tokens{note}")
    return 0


ATTENTIONS = {"encoder": ("encoder", "self_attn"), "decoder": ("decoder", "self_attn"),
              "cross": ("decoder", "cross_attn")}


def cmd_export(args: argparse.Namespace) -> int:
    if not args.text.strip():
        return fail("--text is empty: give a sentence")
    if not args.out.endswith(".html"):
        return fail("--out must end in .html (PNG: open the HTML and use the camera icon)")
    if problem := missing_folder(args.out):
        return fail(problem)
    head: int | str = args.head if args.head in ("mean", "max") else _int(args.head, "--head")
    from ..api import export as export_view
    from ..figures.export import standalone_html
    from ..figures.views import export_figure

    result = load_backend(args.model, **placement(args)).run(args.text, target=args.target)
    group = ATTENTIONS[args.attention] if args.attention else None
    if group is not None and group not in result.attentions():
        return fail(f"{args.model} has no {args.attention} attention")
    if args.view == "heads":
        export_view(result, args.out, view="heads", attention=args.attention, layer=args.layer, head=head)
        print(f"wrote {args.out}")
        return 0
    figure = export_figure(result, args.view, args.layer, head, group)
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(standalone_html(figure, f"attention-viz {args.view}"))
    print(f"wrote {args.out}")
    return 0


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ModelError(f"{name} must be a number, mean or max; got {value!r}") from None


def cmd_models(_: argparse.Namespace) -> int:
    for name, info in MODELS.items():
        ok, where = availability(name)
        status = "available offline" if ok else f"not available: {where}"
        print(f"{name:<20} {info.shape:<16} {status}\n{'':<20} {info.description}")
    print("hf:<hub id or folder>  any model transformers runs (local folders offline; "
          "hub ids only with ATTENTION_VIZ_ALLOW_DOWNLOAD=1)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "atlas":
            return atlas_cli.run(args)
        return {"run": cmd_run, "export": cmd_export, "caption": caption.cmd_caption, "heads": heads.cmd_heads, "patch": patch.cmd_patch, "attribute": attribute.cmd_attribute, "circuit": circuit.cmd_circuit, "models": cmd_models}[args.command](args)
    except OSError as error:  # a path the user named, and the system's reason: not "[Errno 21] Is a directory: '…'"
        return fail(f"{error.filename}: {error.strerror.lower()}" if error.filename and error.strerror else str(error))
    except (ModelError, ValueError) as error:
        return fail(str(error))
