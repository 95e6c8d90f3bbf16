"""The one exception (attnlib._checks.error): AttnInputError is a ValueError, so code that
catches ValueError keeps working, and it is the name attnlib exports."""

import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib._checks import error


def test_error_is_a_value_error():
    assert issubclass(AttnInputError, ValueError)


def test_the_public_name_is_the_one_every_check_raises():
    assert al.AttnInputError is error.AttnInputError
    with pytest.raises(ValueError, match="^Q must be 2-dimensional"):
        al.attention([1.0, 2.0], [[1.0]], [[1.0]])
