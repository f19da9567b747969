"""The real Spark standalone cluster the suite runs the appliance against.

One master and two workers (2 cores, 1 GiB each), every one its own JVM started with
pyspark's ``bin/spark-class``, on loopback with ports the daemons pick; shared by the whole
session and torn down (process groups, executors included) at its end. Each appliance run
is a separate ``appliance run`` process: the driver, with executors in the workers' JVMs.
"""

from __future__ import annotations

import pytest

from bench._local_cluster import LocalCluster

WORKERS, CORES_PER_WORKER = 2, 2


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    cluster = LocalCluster(workers=WORKERS, cores_per_worker=CORES_PER_WORKER,
                           worker_memory="1g", daemon_memory="256m",
                           base_dir=tmp_path_factory.mktemp("spark-cluster"))
    with cluster:
        yield cluster
