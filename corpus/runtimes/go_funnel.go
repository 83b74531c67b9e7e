// Every goroutine hands each result to one collector over an unbuffered channel (the
// pathology): the goroutines take turns at main.collect, which does the shared part alone.
// go_funnel THREADS: GOMAXPROCS=THREADS producer goroutines, each a fixed share of work.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

func scale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv("CORPUS_SCALE"), 64); err == nil && s > 0 {
		return s
	}
	return 1
}

func produce(id int, n int, results chan<- uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	x := uint64(id)*0x9e3779b97f4a7c15 + 1
	for i := 0; i < n; i++ {
		for k := 0; k < 8; k++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		results <- x
	}
}

// collect folds every result into one table, alone.
func collect(results <-chan uint64, table map[uint64]uint64) {
	for x := range results {
		table[x&0xffff] += x
	}
}

func main() {
	threads, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(threads)
	n := int(2_000_000 * scale())
	results := make(chan uint64)
	table := map[uint64]uint64{}
	done := make(chan struct{})
	go func() {
		collect(results, table)
		close(done)
	}()
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go produce(t, n, results, &wg)
	}
	wg.Wait()
	close(results)
	<-done
	fmt.Printf("ops=%d entries=%d\n", n*threads, len(table))
}
