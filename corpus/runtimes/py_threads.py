# Python threads share CPython's GIL (the pathology): they run Python code one at a time.
# py_threads.py THREADS: the main thread is one of the workers, then joins the others.
import os
import sys
import threading


def work(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


threads = int(sys.argv[1])
n = int(2_000_000 * float(os.environ.get("CORPUS_SCALE", "1")))
others = [threading.Thread(target=work, args=(n,)) for _ in range(threads - 1)]
for t in others:
    t.start()
work(n)
for t in others:
    t.join()
print(f"ops={n * threads}")
