// One sync.Mutex around one map: goroutines take turns (the pathology).
// go_mutex THREADS: GOMAXPROCS=THREADS goroutines each do a fixed share of work.
// MUTEX_PROFILE=FILE writes Go's own mutex profile (every contention) there, to check
// scalprof's verdict against.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
)

var mu sync.Mutex
var table = map[uint64]uint64{}

func scale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv("CORPUS_SCALE"), 64); err == nil && s > 0 {
		return s
	}
	return 1
}

func worker(id int, n int, wg *sync.WaitGroup) {
	defer wg.Done()
	x := uint64(id)*0x9e3779b97f4a7c15 + 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		mu.Lock()
		table[x&0xffff] += x
		mu.Unlock()
	}
}

func main() {
	threads, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(threads)
	profile := os.Getenv("MUTEX_PROFILE")
	if profile != "" {
		runtime.SetMutexProfileFraction(1)
	}
	n := int(6_000_000 * scale())
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go worker(t, n, &wg)
	}
	wg.Wait()
	if profile != "" {
		if f, err := os.Create(profile); err == nil {
			pprof.Lookup("mutex").WriteTo(f, 1)
			f.Close()
		}
	}
	fmt.Printf("ops=%d\n", n*threads)
}
