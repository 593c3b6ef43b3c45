"""The servers the relay is measured against, each started as its own process by the orchestrator."""
