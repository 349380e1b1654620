package clustersettest

import (
	"io"
	"net"
	"sync"
)

// cuttableProxy forwards TCP connections to a broker API server. Cut drops every open
// connection (watches included) and refuses new ones, as a network partition between one
// member and the broker would; Restore heals it. TLS passes through untouched.
type cuttableProxy struct {
	target   string
	listener net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// wg counts the accept loop and the pipes, so Close returns only once they have all ended.
	wg sync.WaitGroup
}

func newCuttableProxy(target string) (*cuttableProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cuttableProxy{target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *cuttableProxy) Addr() string { return p.listener.Addr().String() }

func (p *cuttableProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.mu.Unlock()
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// track registers a new connection pair, unless the link was cut while it was being dialled.
func (p *cuttableProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cuttableProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut severs the member from the broker.
func (p *cuttableProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets the member reach the broker again.
func (p *cuttableProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close cuts the link for good and waits for every goroutine of the proxy to end.
func (p *cuttableProxy) Close() {
	p.Cut()
	_ = p.listener.Close()
	p.wg.Wait()
}

func (p *cuttableProxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}
