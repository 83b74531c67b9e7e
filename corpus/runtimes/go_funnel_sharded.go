// The fixed twin of go_funnel: each goroutine folds its own results into its own table
// and hands the collector one batch at the end, over a buffered channel.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
)

func scale() float64 {
	if s, err := strconv.ParseFloat(os.Getenv("CORPUS_SCALE"), 64); err == nil && s > 0 {
		return s
	}
	return 1
}

func produce(id int, n int, batches chan<- map[uint64]uint64) {
	table := map[uint64]uint64{}
	x := uint64(id)*0x9e3779b97f4a7c15 + 1
	for i := 0; i < n; i++ {
		for k := 0; k < 8; k++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		table[x&0xffff] += x
	}
	batches <- table
}

// collect merges the goroutines' tables, one per goroutine.
func collect(batches <-chan map[uint64]uint64, goroutines int) map[uint64]uint64 {
	table := map[uint64]uint64{}
	for g := 0; g < goroutines; g++ {
		for k, v := range <-batches {
			table[k] += v
		}
	}
	return table
}

func main() {
	threads, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(threads)
	n := int(40_000_000 * scale())
	batches := make(chan map[uint64]uint64, threads)
	for t := 0; t < threads; t++ {
		go produce(t, n, batches)
	}
	table := collect(batches, threads)
	fmt.Printf("ops=%d entries=%d\n", n*threads, len(table))
}
