"""What every kind's verifier needs, in one place: fresh verification sandboxes and the judge
scripts run in them (sandboxes), held-out seeds and sizes (heldout), interleaved side-by-side
timing judged with the machine's contention (timing), and the standalone harness every judge
script loads a submission through (harness/entry.py). A kind's verifier package builds on these
and copies none of them."""
