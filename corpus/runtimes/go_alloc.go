// Goroutines build short-lived slices: the Go GC's work grows with the allocation rate.
// go_alloc THREADS: GOMAXPROCS=THREADS goroutines each do a fixed share of work.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

var sink [][]byte
var sinkMu sync.Mutex

func scale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv("CORPUS_SCALE"), 64); err == nil && s > 0 {
		return s
	}
	return 1
}

func worker(n int, wg *sync.WaitGroup) {
	defer wg.Done()
	keep := make([][]byte, 0, 1024)
	for i := 0; i < n; i++ {
		b := make([]byte, 64+i%512)
		b[0] = byte(i)
		keep = append(keep, b)
		if len(keep) == cap(keep) {
			keep = keep[:0]
		}
	}
	sinkMu.Lock()
	sink = append(sink, keep...)
	sinkMu.Unlock()
}

func main() {
	threads, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(threads)
	n := int(4_000_000 * scale())
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go worker(n, &wg)
	}
	wg.Wait()
	fmt.Printf("ops=%d\n", n*threads)
}
