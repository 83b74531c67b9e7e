/* A tiny JIT: machine code copied into an anonymous executable mapping and announced in
 * /tmp/perf-PID.map, the way V8, the JVM and CPython 3.12 publish generated code. Each
 * thread calls the generated loop; it keeps a frame pointer, as JIT code does. The file is
 * left behind on purpose (runtimes leave theirs; profilers read it after the exit).
 * Scales: scalprof must name the generated function and raise no finding. */
#include "common.h"
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* uint64_t spin(uint64_t n): acc = acc * 31 + n, n counting down to 0.
 *   0: 55           push rbp
 *   1: 48 89 e5     mov  rbp, rsp
 *   4: 31 c0        xor  eax, eax
 *   6: 48 85 ff     test rdi, rdi        <- loop
 *   9: 74 0c        je   23
 *  11: 48 6b c0 1f  imul rax, rax, 31
 *  15: 48 01 f8     add  rax, rdi
 *  18: 48 ff cf     dec  rdi
 *  21: eb ef        jmp  6
 *  23: 5d           pop  rbp             <- done
 *  24: c3           ret */
static const unsigned char spin_code[] = {
    0x55, 0x48, 0x89, 0xe5, 0x31, 0xc0, 0x48, 0x85, 0xff, 0x74, 0x0c, 0x48, 0x6b,
    0xc0, 0x1f, 0x48, 0x01, 0xf8, 0x48, 0xff, 0xcf, 0xeb, 0xef, 0x5d, 0xc3,
};

typedef uint64_t (*spin_fn)(uint64_t);
static spin_fn spin;
static long iters;
static uint64_t results[256];

#define CHUNK 100000

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t acc = 0;
    for (long i = 0; i < iters / CHUNK; i++)
        acc += spin(CHUNK);
    results[id % 256] = acc;
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(400000000);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* Write, then execute: W^X, like a real JIT. */
    void *code = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memcpy(code, spin_code, sizeof(spin_code));
    if (mprotect(code, page, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        return 1;
    }
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    /* A new file only: never written through a link another user planted at the name. */
    int mfd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *map = mfd < 0 ? NULL : fdopen(mfd, "w");
    if (!map) {
        perror(path);
        return 1;
    }
    fprintf(map, "%lx %zx jit:corpus_spin_loop\n", (unsigned long)(uintptr_t)code,
            sizeof(spin_code));
    fclose(map);
    spin = (spin_fn)code;
    corpus_run_threads(threads, worker);
    uint64_t sum = 0;
    for (long i = 0; i < threads && i < 256; i++)
        sum += results[i];
    fprintf(stderr, "checksum=%llu\n", (unsigned long long)sum);
    printf("ops=%ld\n", threads * (iters / CHUNK) * CHUNK);
    return 0;
}
