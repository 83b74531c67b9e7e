// Threads take one java.util.concurrent ReentrantLock in turn: its waiters park
// (LockSupport.park, from AbstractQueuedSynchronizer).
import java.util.concurrent.locks.ReentrantLock;

public class LockCounter {
    static final ReentrantLock lock = new ReentrantLock();
    static long total;

    static void add(long x) {
        lock.lock();
        try {
            total += x;
        } finally {
            lock.unlock();
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        double scale = 1;
        String s = System.getenv("CORPUS_SCALE");
        if (s != null) scale = Double.parseDouble(s);
        final long n = (long) (10_000_000 * scale);
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final long seed = t + 1;
            ts[t] = new Thread(() -> {
                long x = seed;
                for (long i = 0; i < n; i++) {
                    x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
                    add(x);
                }
            }, "worker-" + t);
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("ops=" + n * threads + " total=" + total);
    }
}
