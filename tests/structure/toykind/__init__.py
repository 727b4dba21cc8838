"""A toy job kind, registered from outside assay's source (tests/structure/test_toy_kind.py):
squares of a list, checked on held-out inputs and timed against the task's own Model. It is
never shipped; it exists to show that a kind is files of its own plus ASSAY_KINDS rows."""
