"""What every measurement uses: the processes of a run, the servers under test, the machine, the profiler."""
