"""`sapa train` through the sweep's executor interface: a LocalCluster gives the serial run's chunks bit for bit."""

import pandas as pd
import pytest

from sapa.empirics.training import train_study as ts
from sapa.empirics.training.mechanism import MECH_TINY


@pytest.mark.slow
def test_localcluster_chunks_equal_serial(tmp_path):
    pytest.importorskip("distributed")
    from sapa.empirics.montecarlo.distributed import executor_for

    cfg = ts.study_config("tiny")
    serial = ts.run_study(cfg, tmp_path / "s", workers=1, progress=False, mechanism=MECH_TINY)
    with executor_for(workers=2) as ex:
        dask = ts.run_study(cfg, tmp_path / "d", workers=1, progress=False, executor=ex, mechanism=MECH_TINY)
    pd.testing.assert_frame_equal(dask.runs.drop(columns=["cpu_s", "wall_s"], errors="ignore"),
                                  serial.runs.drop(columns=["cpu_s", "wall_s"], errors="ignore"))
    pd.testing.assert_frame_equal(dask.history, serial.history)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("cpu_s", "wall_s")}  # noqa: E731
    assert [strip(r) for r in dask.mechanism["results"]] == [strip(r) for r in serial.mechanism["results"]]
