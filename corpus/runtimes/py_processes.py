# The fixed twin of py_threads: processes, each with its own interpreter and GIL.
import os
import sys
from multiprocessing import Process


def work(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


if __name__ == "__main__":
    procs = int(sys.argv[1])
    n = int(2_000_000 * float(os.environ.get("CORPUS_SCALE", "1")))
    others = [Process(target=work, args=(n,)) for _ in range(procs - 1)]
    for p in others:
        p.start()
    work(n)
    for p in others:
        p.join()
    print(f"ops={n * procs}")
