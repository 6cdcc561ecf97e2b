"""The compressed sentence of a link (inputs/link_text.py): exact round trips, one-sentence refusals of
damaged values, inflating bounded by the box, and the size of a long English text's link."""

from __future__ import annotations

import base64
import hashlib
import re
import urllib.parse
import zlib

import pytest
from prose import english_prose as prose

from attention_viz.errors import ModelError
from attention_viz.inputs import link_text
from attention_viz.inputs.link_text import PARAM, decode, encode, link_value

BOX = 20_000  # the sentence box's characters (ui/state.py MAX_TEXT), without importing streamlit
LINK_BYTES = 8_192
# the link of a view as the app writes it: address, model, the text, the view's choices
PAGE = "https://attention-viz.example.org/"
CHOICES = {"view": "head", "layer": "3", "head": "mean", "weighting": "attention", "hide_special": "0", "window": "2"}
# the dictionary every tz link written so far was compressed against: changing it breaks those links
DICTIONARY_SHA256 = "5fb687bfccbcd6bd6be40129d30b62bf62b59c7ee2b4ae5e19671049488a7369"

TRICKY = {
    "emoji": "Family 👨‍👩‍👧‍👦, flag 🇫🇷, skin tone 👍🏽, keycap 1️⃣ and ❤️ with its selector.",
    "cjk": "我喜欢吃苹果。日本語のテキストと한국어 문장도 있습니다。",
    "rtl": "Hebrew שלום עולם and Arabic مرحبا بالعالم with \u202eoverride\u202c and \u200fmarks\u200e.",
    "html/js": '<script>alert("x")</script><img src=x onerror="alert(1)"> &amp; %20 + = ? # & {{7*7}} ${x}',
    "whitespace": "  leading, trailing  \n\ttabs\r\nCRLF\u00a0nbsp\u2028line sep\u0000nul  ",
    "combining": "naïve café (e\u0301 composed by hand), Zalgo: z\u0351\u0300\u0358a\u0310l\u0366g\u0300o",
    "astral": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 and 𓀀 hieroglyph",
    "one char": "a",
    "empty": "",
}


def whole_link(text: str) -> str:
    name, value = link_value(text)
    return PAGE + "?" + urllib.parse.urlencode({"model": "minilm", name: value, **CHOICES})


@pytest.mark.parametrize("name", list(TRICKY))
def test_every_text_comes_back_byte_for_byte(name):
    text = TRICKY[name]
    value = encode(text)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", value)  # nothing a link must escape
    assert decode(value, BOX).encode("utf-8") == text.encode("utf-8")


def test_a_long_english_text_makes_a_link_under_8_kb_that_opens_to_the_same_text():
    text = prose()
    assert len(text.split()) == 2_500 and len(set(text.split())) > 800  # prose, not one word repeated
    link = whole_link(text)
    print(f"2,500 words, {len(text):,} characters: link {len(link.encode()):,} bytes "
          f"(plain text= {len(urllib.parse.quote_plus(text)):,} characters)")
    assert len(link.encode("ascii")) <= LINK_BYTES, (
        "2,500 words of the docs' prose (tests/prose.txt) no longer fit an 8 KB link")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
    assert PARAM in query and "text" not in query
    assert decode(query[PARAM], BOX) == text


def test_short_texts_stay_plain_and_readable():
    assert link_value("The animal didn't cross the street because it was too tired.") == (
        "text", "The animal didn't cross the street because it was too tired.")
    repeated = "cat dog bird " * 60  # compresses to little, but under READABLE characters as plain text
    assert len(urllib.parse.quote_plus(repeated)) <= link_text.READABLE and link_value(repeated)[0] == "text"


def test_the_plain_form_is_kept_where_compressing_does_not_shorten_it():
    noise = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(2_000))  # ideographs in no order
    name, value = link_value(noise)
    assert (name, value) == ("text", noise) or len(value) < len(urllib.parse.quote_plus(noise))


def test_the_dictionary_never_changes():
    digest = hashlib.sha256(link_text.dictionary()).hexdigest()
    assert digest == DICTIONARY_SHA256, (
        "link_words.txt changed: every tz link written so far would open to garbage or be refused; "
        "add a new dictionary under a new VERSION instead")


def _raw(data: bytes, zdict: bytes | None = None) -> str:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict or link_text.dictionary())
    return link_text.VERSION + base64.urlsafe_b64encode(packer.compress(data) + packer.flush()).decode().rstrip("=")


@pytest.mark.parametrize("value, says", [
    ("", "is empty"),
    ("1", "cut short"),
    ("1abc$def", "damaged"),
    ("1 abc", "damaged"),
    ("1abcde", "damaged"),  # a length no base64 has
    ("1" + "A" * 40, "damaged"),
    ("9" + encode("hello")[1:], "another version"),
])
def test_a_damaged_value_is_refused_in_one_sentence(value, says):
    with pytest.raises(ModelError) as refused:
        decode(value, BOX)
    message = str(refused.value)
    assert says in message and "\n" not in message and "Traceback" not in message


def test_a_value_cut_short_is_refused():
    value = encode(prose(300))
    for cut in (len(value) // 2, len(value) - 4):
        with pytest.raises(ModelError, match="cut short|damaged"):
            decode(value[:cut], BOX)


def test_data_after_the_end_and_bytes_that_are_not_utf8_are_refused():
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, link_text.dictionary())
    packed = packer.compress(b"hello") + packer.flush() + b"more"
    with pytest.raises(ModelError, match="follows its end"):
        decode(link_text.VERSION + base64.urlsafe_b64encode(packed).decode().rstrip("="), BOX)
    with pytest.raises(ModelError, match="UTF-8"):
        decode(_raw(b"caf\xe9 \xff\xfe"), BOX)


def test_a_zip_bomb_is_refused_without_inflating_it_all(monkeypatch):
    bomb = _raw(b"\0" * 20_000_000)  # 20 MB of zeros in some 26,000 characters of link
    assert len(bomb) < 100_000
    asked: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args, **kwargs):
            self.inner = real(*args, **kwargs)

        def decompress(self, data, max_length=0):
            out = self.inner.decompress(data, max_length)
            asked.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    with pytest.raises(ModelError, match="opens to more than the 20,000 characters"):
        decode(bomb, BOX)
    assert sum(asked) <= 4 * BOX + 1  # inflated no further than a full box of 4-byte characters


def test_a_text_longer_than_the_box_is_refused_with_its_length():
    with pytest.raises(ModelError, match="opens to 20,001 characters"):
        decode(encode("a" * 20_001), BOX)
    assert decode(encode("a" * 20_000), BOX) == "a" * 20_000
