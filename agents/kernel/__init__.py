"""The kernel kind's agent side: its options, staging, prompts (kind.py) and the playbook brain
(playbook.py). The kernel library the playbook and the tools draw on (templates, autotuner,
task inspection) is the top-level kernels/ room."""
