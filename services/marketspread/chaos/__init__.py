"""`marketspread chaos`: the local stack with a real fault injected mid-stream, checked for exactness.

A scenario runs its own broker, the Spark job, the receiver and two concurrent senders, kills
or restarts one component for real while the streams flow, recovers it the way an operator's
restart policy would, and then compares what the receiver got (deduplicated by order id) with
the reference model: nothing lost, nothing invented.
"""
