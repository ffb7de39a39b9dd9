"""Put on PYTHONPATH by cpu_per_request.py --profile: every Python process of the server's tree gets a cProfile that
SIGUSR1 switches on (in the main thread) and SIGUSR2 switches off, writing PROFHOOK_DIR/<argv tail>-<pid>.prof."""

import os

if os.environ.get("PROFHOOK_DIR"):
    import cProfile
    import signal
    import sys
    import time

    # PROFHOOK_CLOCK=thread: the calling thread's CPU time (time spent preempted or blocked in a system call that
    # waits is not counted), instead of wall time
    _profile = (cProfile.Profile(time.thread_time_ns, 1e-9) if os.environ.get("PROFHOOK_CLOCK") == "thread"
                else cProfile.Profile())

    def _on(*_):
        _profile.enable()

    def _off(*_):
        _profile.disable()
        tail = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("-m", "-c") else "python"
        if "pytriton.backends.worker" in " ".join(sys.orig_argv if hasattr(sys, "orig_argv") else sys.argv):
            tail = "worker"
        elif "pytriton.cli" in " ".join(getattr(sys, "orig_argv", sys.argv)):
            tail = "server"
        _profile.dump_stats(os.path.join(os.environ["PROFHOOK_DIR"], f"{tail}-{os.getpid()}.prof"))

    signal.signal(signal.SIGUSR1, _on)
    signal.signal(signal.SIGUSR2, _off)

if os.environ.get("PROFHOOK_GC"):  # time spent in the cyclic garbage collector, per generation, while switched on
    import gc
    import signal
    import sys
    import time

    _gc = {"on": False, "start": 0, "time": [0, 0, 0], "count": [0, 0, 0]}

    def _gc_callback(phase, info):
        if not _gc["on"]:
            return
        if phase == "start":
            _gc["start"] = time.thread_time_ns()
        else:
            g = info["generation"]
            _gc["time"][g] += time.thread_time_ns() - _gc["start"]
            _gc["count"][g] += 1

    gc.callbacks.append(_gc_callback)

    def _gc_on(*_):
        _gc["on"] = True

    def _gc_off(*_):
        _gc["on"] = False
        argv = " ".join(getattr(sys, "orig_argv", sys.argv))
        tail = "worker" if "pytriton.backends.worker" in argv else "server" if "pytriton.cli" in argv else "python"
        with open(os.path.join(os.environ["PROFHOOK_GC"], f"gc-{tail}-{os.getpid()}.txt"), "w") as out:
            out.write(f"collections {_gc['count']} thread-cpu ns {_gc['time']}\n")

    signal.signal(signal.SIGUSR1, _gc_on)
    signal.signal(signal.SIGUSR2, _gc_off)
