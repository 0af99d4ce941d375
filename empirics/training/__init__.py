"""The training study: does x^p/√N keep attention trainable as N grows? Tiny transformers (``tiny_models``)
trained E at a time (``ensemble``) on offline data (``train_data``), designed in ``study_config``, trained
chunk by chunk (``study_chunk``), sealed in a store (``study_store``), run by ``train_study`` and analysed
arm by arm (``study_analysis``; ``dose_response``: norm against accuracy over the doses of a scale; ``bigram``: the text floor);
``train_bench`` measures the ensemble's speed-up.
"""
