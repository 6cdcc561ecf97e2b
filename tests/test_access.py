"""What a name may load: the operator's model roots, the server's reach, and nothing probed by a link."""

import os
import tomllib
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1.util import patch_config_options

from attention_viz.runtime import access
from attention_viz.runtime.access import MODEL_ROOTS_ENV, beyond_loopback, hf_source
from attention_viz.backends import hf, registry
from attention_viz.errors import ModelError
from attention_viz.runtime.model_cache import ModelCache
from attention_viz.core.names import ENCODER_SELF
from attention_viz.ui import cache

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    """roots/{tiny-bert, empty}, outside/{secret-model, ...}, and links from inside a root to outside."""
    from test_hf_backend import save_bert

    base = tmp_path_factory.mktemp("access")
    roots = base / "roots"
    save_bert(roots / "tiny-bert")
    (roots / "empty").mkdir()
    save_bert(base / "outside" / "secret-model")
    (roots / "escape").symlink_to(base / "outside" / "secret-model")
    (roots / "escape-dir").symlink_to(base / "outside")
    return base


@pytest.fixture
def fresh(monkeypatch):
    """An empty model cache and no operator settings, for each test."""
    monkeypatch.setattr(registry, "_loaded", ModelCache())
    for name in (MODEL_ROOTS_ENV, hf.ALLOW_DOWNLOAD_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def opened(monkeypatch):
    """Records every spec the hf: backend is asked to open: a refusal must come before any of them."""
    specs = []
    real = hf.HFBackend

    def recording(spec, *placement):
        specs.append(spec)
        return real(spec, *placement)

    monkeypatch.setattr(hf, "HFBackend", recording)
    return specs


def refused(name: str, exposed: bool = False) -> str:
    with pytest.raises(ModelError) as error:
        registry.load_backend(name, exposed=exposed)
    return str(error.value)


def outside_specs(disk: Path) -> list[str]:
    """Existing and missing paths outside the roots, reached directly, by `..`, and through links."""
    roots = disk / "roots"
    return [
        str(disk / "outside" / "secret-model"),  # exists, a loadable model
        str(disk / "outside" / "no-such-model"),  # does not exist
        str(disk / "outside"),
        "/etc",
        "/no/such/folder",
        f"{roots}/../outside/secret-model",  # `..` out of a root
        f"{roots}/tiny-bert/../../outside/secret-model",
        "../outside/secret-model",  # relative, resolved against a root
        f"{roots}/escape",  # a symlink inside a root pointing outside
        "escape",
        f"{roots}/escape-dir/secret-model",
        "escape-dir/no-such-model",
        "~",
        "~no-such-user-here/model",
        "./tiny-bert/../../outside",
    ]


def test_inside_a_root_loads_and_runs(disk, fresh, opened):
    fresh.setenv(MODEL_ROOTS_ENV, f"{disk / 'nowhere'}:{disk / 'roots'}")
    backend = registry.load_backend(f"hf:{disk / 'roots' / 'tiny-bert'}")
    pattern = backend.run("the cat sat on the mat").pattern(ENCODER_SELF, 1)
    assert opened == [str((disk / "roots" / "tiny-bert").resolve())]
    assert pattern.shape[1] == pattern.shape[2] == 8 and np.allclose(pattern.sum(-1), 1, atol=1e-5)


def test_a_relative_name_is_looked_up_inside_the_roots_and_loads_once(disk, fresh, opened):
    fresh.setenv(MODEL_ROOTS_ENV, str(disk / "roots"))
    by_name = registry.load_backend("hf:tiny-bert")
    by_path = registry.load_backend(f"hf:{disk / 'roots' / 'tiny-bert'}")
    by_dots = registry.load_backend(f"hf:{disk / 'roots' / 'empty' / '..' / 'tiny-bert'}")
    assert by_name is by_path is by_dots and len(opened) == 1


@pytest.mark.parametrize("exposed", [False, True])
def test_outside_the_roots_one_message_whether_or_not_the_path_exists(disk, fresh, opened, exposed):
    fresh.setenv(MODEL_ROOTS_ENV, str(disk / "roots"))
    messages = {refused(f"hf:{spec}", exposed=exposed) for spec in outside_specs(disk)}
    assert len(messages) == 1, messages
    message = messages.pop()
    assert str(disk / "roots") in message and MODEL_ROOTS_ENV in message
    assert "outside" not in message and "secret" not in message and "exist" not in message
    assert opened == []  # refused before the backend touched any of them


def test_a_missing_folder_inside_a_root_is_named_only_by_its_path_inside(disk, fresh):
    fresh.setenv(MODEL_ROOTS_ENV, str(disk / "roots"))
    message = refused("hf:not-there-yet")
    assert str(disk / "roots" / "not-there-yet") in message and "does not exist" in message


def test_served_beyond_loopback_without_roots_loads_no_folder(disk, fresh, opened):
    specs = outside_specs(disk) + [str(disk / "roots" / "tiny-bert"), "tiny-bert", "gpt2", "org/some-model"]
    messages = {refused(f"hf:{spec}", exposed=True) for spec in specs}
    assert len(messages) == 1, messages
    assert "reachable beyond this machine" in messages.pop()
    assert opened == []


def test_on_loopback_without_roots_everything_stays_as_before(disk, fresh):
    assert registry.load_backend(f"hf:{disk / 'outside' / 'secret-model'}").shape == "encoder-only"
    # and the backend's own, precise messages still reach the person at their own machine
    assert "does not exist" in refused(f"hf:{disk / 'outside' / 'no-such-model'}")
    assert "hub id or a local folder" in refused("hf:")
    for spec in ("../../etc", "/etc", "~"):
        assert hf_source(spec) == spec


def test_hub_ids_stay_off_unless_the_operator_allows_downloads(disk, fresh, opened):
    fresh.setenv(MODEL_ROOTS_ENV, str(disk / "roots"))
    for hub_id in ("gpt2", "openai-community/gpt2"):  # read as folders inside the roots, never fetched
        assert f"{disk / 'roots' / hub_id} does not exist" in refused(f"hf:{hub_id}")
    assert opened == [str(disk / "roots" / "gpt2"), str(disk / "roots" / "openai-community" / "gpt2")]
    fresh.setenv(hf.ALLOW_DOWNLOAD_ENV, "1")
    assert hf_source("openai-community/gpt2") == "openai-community/gpt2"
    assert hf_source("gpt2", exposed=True) == "gpt2"
    # a hub-shaped name is never read as a folder in the server's working directory
    fresh.chdir(disk / "outside")
    assert (disk / "outside" / "secret-model").is_dir()
    assert hf_source("secret-model") == str(disk / "roots" / "secret-model")  # (which does not exist)
    fresh.delenv(MODEL_ROOTS_ENV)
    with pytest.raises(ModelError, match="reachable beyond this machine"):
        hf_source("secret-model", exposed=True)


def test_a_link_cannot_send_an_unbounded_or_broken_name(disk, fresh):
    fresh.setenv(MODEL_ROOTS_ENV, str(disk / "roots"))
    outside = refused("hf:/etc")
    for spec in ("a" * 5000, "/" + "x/" * 3000, "tiny-bert\0", f"{disk / 'roots'}/\0"):
        assert refused(f"hf:{spec}") == outside


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "LOCALHOST", "::1", "[::1]", "127.0.0.2"])
def test_loopback_addresses(address):
    assert not beyond_loopback(address)


@pytest.mark.parametrize("address", [None, "", "0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.org"])
def test_addresses_that_answer_other_machines(address):
    assert beyond_loopback(address)  # no address at all: Streamlit listens on every interface


def test_the_page_edge_reads_the_server_address_from_streamlits_config(disk, fresh):
    folder = f"hf:{disk / 'outside' / 'secret-model'}"
    with patch_config_options({"server.address": "0.0.0.0", "global.appTest": False}):
        with pytest.raises(ModelError, match="reachable beyond this machine"):
            cache.backend(folder)
    with patch_config_options({"server.address": "127.0.0.1", "global.appTest": False}):
        assert cache.backend(folder).shape == "encoder-only"


def test_roots_are_read_from_the_environment_separated_by_colons(tmp_path, fresh):
    (tmp_path / "a").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a")
    fresh.setenv(MODEL_ROOTS_ENV, f"{link}::{tmp_path / 'b'}:")
    assert access.model_roots() == [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
    fresh.setenv(MODEL_ROOTS_ENV, "")
    assert access.model_roots() is None


def test_streamlits_xsrf_protection_stays_on():
    """Neither the project's Streamlit config nor any command that serves the app turns it off."""
    config_file = ROOT / ".streamlit" / "config.toml"
    if config_file.exists():
        server = tomllib.loads(config_file.read_text()).get("server", {})
        assert server.get("enableXsrfProtection", True) is True
        assert server.get("enableCORS", True) is True  # Streamlit turns XSRF off when CORS is off
    serving = [ROOT / "Makefile", ROOT / "Dockerfile", *(ROOT / "deploy").glob("*"), ROOT / "tests" / "browser.py"]
    for path in serving:
        text = path.read_text().lower() if path.is_file() else ""
        assert "xsrfprotection" not in text and "enablecors" not in text, path
    assert "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION" not in os.environ
    from streamlit import config

    assert config.get_option("server.enableXsrfProtection") is True
