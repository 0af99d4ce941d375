"""sapa's Python API: the computations behind the commands, callable with numpy arrays or torch tensors.

The top of the package (``sapa.audit``, ``sapa.norms``, ``sapa.exact``, ``sapa.compare``, ``sapa.load_ledger``)
re-exports them; docs/api.md documents each with examples that run as doctests.
"""
