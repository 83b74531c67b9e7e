/* The program behind golden.perf.data: no libc, so its symbols are the same on every
 * machine. Built with
 *   cc -O1 -g -fno-omit-frame-pointer -fno-pie -no-pie -nostdlib -static -o golden golden.c
 * and recorded from /tmp/scalprof-golden/golden with
 *   perf record -q -e cpu-clock:u -F 997 -g -o golden.perf.data /tmp/scalprof-golden/golden
 */
static volatile unsigned long sink;

__attribute__((noinline)) void leaf_add(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline)) void leaf_xor(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink ^= i;
}

__attribute__((noinline)) void work(void)
{
	leaf_add(150000000);
	leaf_xor(300000000);
}

void _start(void)
{
	work();
	__asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
	__builtin_unreachable();
}
