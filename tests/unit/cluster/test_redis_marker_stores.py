"""gateway/cluster/redis_marker_stores.py: whether a Redis Cluster node may keep
markers alone, read from another node's CLUSTER NODES."""

from __future__ import annotations

from redis._parsers.helpers import parse_cluster_nodes

from gateway.cluster.redis_marker_stores import alone_in

PRIMARY_ID, REPLICA_ID = "e7d1" * 10, "07c3" * 10
MASTER = f"{PRIMARY_ID} 127.0.0.1:30001@31001 master - 0 0 1 connected 0-5460"
REPLICA = f"{REPLICA_ID} 127.0.0.1:30004@31004 {{flags}} {PRIMARY_ID} 0 1 4 connected"


def nodes(*lines: str) -> dict[str, dict[str, str]]:
    parsed: dict[str, dict[str, str]] = parse_cluster_nodes("\n".join(lines) + "\n")
    return parsed


def test_a_primary_with_a_healthy_replica_is_not_alone() -> None:
    assert not alone_in(nodes(MASTER, REPLICA.format(flags="slave")), "127.0.0.1:30001")


def test_a_primary_whose_replica_failed_is_alone() -> None:
    assert alone_in(nodes(MASTER, REPLICA.format(flags="slave,fail")), "127.0.0.1:30001")
    assert alone_in(nodes(MASTER), "127.0.0.1:30001")


def test_a_node_the_others_see_failed_or_as_a_replica_may_not_go_alone() -> None:
    failed = MASTER.replace(" master ", " master,fail ")
    assert not alone_in(nodes(failed), "127.0.0.1:30001")
    demoted = REPLICA.format(flags="slave")
    assert not alone_in(nodes(MASTER, demoted), "127.0.0.1:30004")
    assert not alone_in(nodes(MASTER), "127.0.0.1:9999")  # not known at all
    assert not alone_in("not parsed", "127.0.0.1:30001")
