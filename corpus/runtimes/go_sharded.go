// The fixed twin of go_mutex: each goroutine has its own shard (its own mutex and map).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

type shard struct {
	mu    sync.Mutex
	table map[uint64]uint64
	_     [64]byte
}

func scale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv("CORPUS_SCALE"), 64); err == nil && s > 0 {
		return s
	}
	return 1
}

func worker(s *shard, id int, n int, wg *sync.WaitGroup) {
	defer wg.Done()
	x := uint64(id)*0x9e3779b97f4a7c15 + 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		s.mu.Lock()
		s.table[x&0xffff] += x
		s.mu.Unlock()
	}
}

func main() {
	threads, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(threads)
	n := int(6_000_000 * scale())
	shards := make([]shard, threads)
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		shards[t].table = map[uint64]uint64{}
		wg.Add(1)
		go worker(&shards[t], t, n, &wg)
	}
	wg.Wait()
	fmt.Printf("ops=%d\n", n*threads)
}
