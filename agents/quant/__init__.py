"""The quant kind's agent side: its options, staging, prompt and playbook brain."""
