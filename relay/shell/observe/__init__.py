"""What an operator watches: Prometheus metrics, event-loop lag, opt-in allocation traces."""
