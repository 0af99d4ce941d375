"""The ledger's words: the statements, headlines, answers, corrected claims and condition rows of its entries.

One module per entry or family of entries (``<topic>_words.py``). A builder takes the numbers a check computed and
the verdicts its rules gave, and returns text: it decides nothing, and every threshold it quotes comes from the
rule's or the entry's constant, never retyped. The checks in :mod:`sapa.claims` call them.
"""
