package sim

import (
	"context"
	"sync"
)

// parallelFor runs do(state, i) for i in [0, n) on workers goroutines, each with its own state
// from newState (allocators and buffers are not shared). It stops handing out work when ctx ends
// and returns ctx's error then; work already started finishes.
func parallelFor[S any](ctx context.Context, n, workers int, newState func() S, do func(state S, i int)) error {
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state := newState()
			for i := range next {
				do(state, i)
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	return err
}
