"""A part of the e2e suite run against two relay nodes on a NATS JetStream cluster.

The tests are the e2e modules' own, unchanged; here ``server`` is a pair of nodes handing out their addresses
in turn (tests/cluster/conftest.py), so the GM, the players and the spectators of one room sit on different
nodes, and the behaviour they check (resume, idempotent roll ids, audiences, commitments and reveals, Fear and
Hope, signatures, exports) must hold across nodes exactly as on one.
"""

from tests.e2e.test_bad_input import (  # noqa: F401
    table,
    test_reveal_of_a_missing_roll_and_spend_without_fear,
    test_roles_are_enforced,
)
from tests.e2e.test_fear import *  # noqa: F403
from tests.e2e.test_membership import *  # noqa: F403
from tests.e2e.test_resume import *  # noqa: F403
from tests.e2e.test_signing import (  # noqa: F401
    test_any_change_breaks_the_signature,
    test_every_event_a_client_receives_verifies,
    test_export_and_verify_offline,
    test_the_keys_endpoint_is_public_and_cacheable,
)
from tests.e2e.test_visibility import *  # noqa: F403
