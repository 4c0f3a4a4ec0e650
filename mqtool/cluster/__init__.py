"""`mqtool cluster start`: a local cluster (a name server, its controller, N broker groups of R replicas)
planned as config files (plan.py), run and restarted as child processes (supervisor.py), and described
in a state file that `mqtool cluster status` reads (state.py)."""
