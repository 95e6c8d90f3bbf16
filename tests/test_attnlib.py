"""The package itself (attnlib/__init__.py): the core's public names, the version, and
advise, which draws on every part of the book and is therefore imported on first use."""

import subprocess
import sys

import pytest

import attnlib as al


def test_every_public_name_is_there():
    assert set(al.__all__) >= {"attention_forward", "flash_backward", "forward_backward"}
    for name in al.__all__:
        assert getattr(al, name) is not None, name
    assert al.__version__.count(".") == 2


def test_advise_is_imported_on_first_use():
    code = (
        "import sys, attnlib as al\n"
        "assert 'attnlib.advice' not in sys.modules\n"
        "from attnlib.advice import advise\n"
        "assert al.advise is advise\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match=r"^module 'attnlib' has no attribute 'advice_'$"):
        al.advice_  # noqa: B018
    assert not hasattr(al, "no_such_name")
