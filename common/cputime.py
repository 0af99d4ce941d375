"""CPU seconds of this process and its children (user + system): what a run costs, whatever else shares the machine.

``tree_cpu_seconds() = own + reaped children's + live descendants'`` (the live ones read from /proc through psutil
where it is installed, else left out). The difference of two readings is the CPU spent between them by this process
and every worker it started (a pool's workers stay alive across stages, so their time is read live).
"""

from __future__ import annotations

import os

__all__ = ["tree_cpu_seconds"]


def tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process, its reaped children and (with psutil) its live descendants.

    >>> a = tree_cpu_seconds(); sum(i * i for i in range(10 ** 5)) > 0; tree_cpu_seconds() >= a
    True
    True
    """
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    try:
        import psutil
    except ImportError:  # without psutil: live workers are counted once they exit
        return total
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return total
    for k in kids:
        try:
            c = k.cpu_times()
        except psutil.Error:  # exited between the listing and the reading
            continue
        total += c.user + c.system + c.children_user + c.children_system  # and what it reaped
    return total
