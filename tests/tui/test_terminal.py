"""`assay tui` in a real terminal: tmux at 80x24, driven with send-keys, read with capture-pane."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from assay.agents.workflow import decision_for

ASSAY = Path(sys.executable).with_name("assay")


def toasts(screen: str) -> str:
    """The text of the notifications on a screen: what follows each line's last gutter mark."""
    return "\n".join(line.rsplit("\u258c", 1)[1] for line in screen.splitlines() if "\u258c" in line)


def squash(text: str) -> str:
    # A notification wraps at the width of its box, and a path (whose length depends on where
    # the checkout lives) breaks mid-word: compare with every space and line break taken out.
    return "".join(text.split())


class Tmux:
    def __init__(self) -> None:
        # A server of our own: no clash with anyone's tmux, and killing it kills only ours.
        self.socket = f"assay-tui-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        return out.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "tui")

    def wait_for(self, text: str, timeout: float = 40.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen or squash(text) in squash(toasts(screen)):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        for k in keys:
            self("send-keys", "-t", "tui", k)
            time.sleep(0.15)


@pytest.fixture
def tui_in_tmux(need, _isolated_home):
    """Start `assay tui` at 80x24 in a tmux server of its own; yield the driver."""
    need(shutil.which("tmux") is not None, "tmux is not installed")
    need(ASSAY.exists(), f"no assay entry point at {ASSAY}")
    env = f"ASSAY_HOME={shlex.quote(str(_isolated_home))} TERM=xterm-256color"
    # The shell stays after the app so the pane (and its exit status) can be read.
    cmd = f"env -u ASSAY_LEDGER_URL {env} {shlex.quote(str(ASSAY))} tui --poll 0.3; echo TUI-EXIT=$?; sleep 30"
    t = Tmux()

    def start(cwd: Path | None = None) -> Tmux:
        where = ["-c", str(cwd)] if cwd else []
        t("new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", *where, cmd)
        # tmux otherwise holds an Escape for 500 ms to see if it starts Alt+key: Escape then q
        # would arrive as one Alt+q.
        t("set-option", "-s", "escape-time", "0")
        return t

    yield start
    socket = t("display-message", "-p", "#{socket_path}").strip()
    t("kill-server")
    if socket:
        Path(socket).unlink(missing_ok=True)  # tmux leaves its socket file behind


def test_approve_in_a_real_terminal(tui_in_tmux, filled, tui):
    t = tui_in_tmux()
    t.wait_for("4 runs")
    screen = t.wait_for("q Quit")  # the footer is drawn last
    assert tui.WAITING in screen and "PASS 1.84x" in screen
    t.keys("a")
    screen = t.wait_for("g++ -O3 -fopenmp -shared kernel.cpp -o kernel.so")
    assert "long builds" in screen and "exec#1" in screen
    t.keys("y")
    deadline = time.monotonic() + 20
    while decision_for(filled, tui.WAITING, "approval-1") is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert decision_for(filled, tui.WAITING, "approval-1") == "approved"
    assert [e.actor for e in filled.approval_events(tui.WAITING) if e.event == "approved"] == ["tui"]
    t.wait_for("No call is waiting")
    t.keys("Escape")
    t.wait_for("4 runs")
    # Find the run by filter: a typed id, not a cursor position, says which run opens.
    t.keys("/", *tui.WAITING[-6:], "Enter")
    t.wait_for("1 of 4 runs")
    t.keys("Enter")
    screen = t.wait_for("approval-1 by tui")
    assert "approved" in screen and "actor: tui" in screen
    t.keys("Escape", "q")
    t.wait_for("TUI-EXIT=0")


def test_an_unsigned_manifest_is_refused_before_anything_starts(tui_in_tmux, _isolated_home):
    # No manifest signed in this ASSAY_HOME: the run is refused in the TUI's own process, as a
    # notification naming the fix, before a tool server starts or a run row is written.
    t = tui_in_tmux()
    t.wait_for("q Quit")
    t.keys("n")
    t.wait_for("Start a run")
    t.keys("Enter")
    screen = t.wait_for("is not signed")
    note = squash(toasts(screen))
    assert squash("policies/manifests/kernel-agent.toml") in note and squash("assay policy sign") in note
    assert "assay: error:" not in screen and "0 runs" in screen
    assert not (_isolated_home / "runs").exists()


LEAKY = "restore_placeholders = true  # refused by the tool server: exec hands arguments to a sandbox\n"


@pytest.mark.slow
def test_a_tool_server_that_will_not_start_says_why_off_the_screen(tui_in_tmux, _isolated_home, tmp_path):
    # A manifest signed by this home's key, so the TUI's own check passes, but one the tool
    # server refuses: it says why on its stderr, which must reach the person as a notification,
    # not as text scribbled across the screen.
    from assay.policies.manifest import SHIPPED_DIR
    from assay.policies.signing import keygen, sign_manifest

    repo = Path(__file__).resolve().parents[2]
    keygen(if_missing=True)
    text = (SHIPPED_DIR / "kernel-agent.toml").read_text().replace("[tools.exec]\n", "[tools.exec]\n" + LEAKY)
    assert LEAKY in text
    (tmp_path / "leaky.toml").write_text(text)
    sign_manifest(tmp_path / "leaky.toml")
    job = (repo / "examples/kernel/softmax.toml").read_text().replace('"kernel-agent"', f'"{tmp_path}/leaky.toml"')
    (tmp_path / "job.toml").write_text(job.replace('"softmax.py"', f'"{repo}/examples/kernel/softmax.py"'))
    t = tui_in_tmux(cwd=tmp_path)
    t.wait_for("q Quit")
    t.keys("n")
    t.wait_for("Start a run")
    t.keys("job.toml", "Enter")
    screen = t.wait_for("tool server said", timeout=90)
    assert squash("receive restored secrets") in squash(toasts(screen))
    assert "assay: error:" not in screen
    log = (_isolated_home / "logs" / "tui.log").read_text()
    assert "assay: error: manifest" in log and "receive restored secrets" in log
