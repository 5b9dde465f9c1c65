"""SIGTERM, as Kubernetes and `kill` send it, stops a command the way Ctrl-C does."""

import os
import signal

import pytest

from marketspread.stopping import terminate_as_interrupt


@pytest.fixture
def restored_sigterm():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_reaches_finally_blocks_as_a_keyboard_interrupt(restored_sigterm):
    terminate_as_interrupt()
    cleaned_up = []
    with pytest.raises(KeyboardInterrupt):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.5)  # give the handler its chance to run
        finally:
            cleaned_up.append(True)
    assert cleaned_up == [True]
