// Tasks whose results are written out in order (gofmt's sequencer): each task runs in its
// own goroutine, holds a slot of a bounded pool while it runs, and hands its result over a
// channel made for it alone to the next task, which waits for it before writing its own.
// One task in eight is ten times longer: the tasks after it wait, holding their slots, and
// the pool runs dry. go_ordered THREADS: GOMAXPROCS=THREADS, THREADS slots.
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

type sequencer struct {
	slots chan struct{}
	prev  chan uint64
	out   []uint64
}

// work is a task's own part, in proportion to its size.
func work(seed uint64, size int) uint64 {
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := 0; i < size; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// add starts task i once a slot is free.
func (s *sequencer) add(i int, size int) {
	s.slots <- struct{}{}
	next := make(chan uint64, 1)
	go s.run(i, size, s.prev, next)
	s.prev = next
}

// run does the task, then waits for the one before it to have written its result.
func (s *sequencer) run(i int, size int, prev <-chan uint64, next chan<- uint64) {
	r := work(uint64(i), size)
	total := <-prev
	s.out = append(s.out, r)
	next <- total + r
	<-s.slots
}

func main() {
	threads, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(threads)
	tasks := int(4000 * scale())
	s := &sequencer{slots: make(chan struct{}, threads), prev: make(chan uint64, 1)}
	s.prev <- 0
	for i := 0; i < tasks; i++ {
		size := 20_000
		if i%8 == 0 {
			size = 200_000
		}
		s.add(i, size)
	}
	total := <-s.prev
	fmt.Printf("ops=%d total=%d\n", tasks, total)
}
