"""One generator per figure; each reads stored results or exact curves (arXiv 2410.18613)."""
