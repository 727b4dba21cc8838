import os
import sys

# `python -m assay` puts the working directory first on sys.path. Run from a checkout of assay,
# that makes its rooms (kernels/, tools/, cli/, ...) importable as top-level packages that shadow
# real distributions of the same names: transformers imports huggingface's `kernels` and got
# ours. Run anywhere else, it imports whatever that folder holds. assay is installed and needs
# nothing from the working directory, so it never looks there (what `python -P` does).
if sys.path and os.path.abspath(sys.path[0] or ".") == os.getcwd():
    del sys.path[0]

from assay.cli.main import main  # noqa: E402

main()
