"""relay.shell.cluster.presence's pure parts: whose keys a bucket holds, and which members a dead run leaves
behind."""

from __future__ import annotations

from relay.core.state import Member
from relay.shell.cluster.presence import node_name, owners, stale


def test_owners_are_read_from_key_subjects_of_the_right_depth_only() -> None:
    subjects = [
        "$KV.tablerelay_presence.relay1.ab12.room1",
        "$KV.tablerelay_presence.relay1.ab12.room2",
        "$KV.tablerelay_presence.relay2.cd34.room1",
        "$KV.tablerelay_presence.relay3.ef56",  # a heartbeat-shaped key: not a presence key
        "$KV.tablerelay_nodes.relay9.0000.room",  # another bucket
    ]
    assert owners(subjects, "tablerelay_presence", 3) == {"relay1.ab12", "relay2.cd34"}
    beats = ["$KV.tablerelay_nodes.relay1.ab12", "$KV.tablerelay_nodes.relay2.cd34"]
    assert owners(beats, "tablerelay_nodes", 2) == {"relay1.ab12", "relay2.cd34"}


def test_stale_members_are_those_listed_present_and_claimed_by_nobody() -> None:
    present = {pid: Member(pid, pid.upper(), "player") for pid in ("a", "b", "c")}
    listed = ["a", "b", "d"]  # d already left
    assert stale(listed, present, claimed={"b"}) == [present["a"]]
    assert stale(listed, present, claimed=set()) == [present["a"], present["b"]]
    assert stale([], present, claimed=set()) == []


def test_a_node_without_a_name_gets_a_random_one() -> None:
    assert node_name("relay1") == "relay1"
    first, second = node_name(None), node_name(None)
    assert first.startswith("node-")
    assert first != second
