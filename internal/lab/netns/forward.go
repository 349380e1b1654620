package netns

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// In runs fn on a thread that has entered the named namespace (under /run/netns) and is thrown
// away afterwards, so no goroutine ever runs on it in the wrong namespace. Sockets fn opens stay
// in the namespace for their whole life, whichever thread uses them later: that is how one
// process serves addresses inside many namespaces without a thread parked in each.
func In(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends the thread with the goroutine.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Forwarder relays TCP connections and UDP datagrams that arrive inside a namespace to an
// address of the host's network, such as a DNS server on the host's loopback.
type Forwarder struct {
	tcp net.Listener
	udp net.PacketConn
}

// ForwardIn listens on addr (host:port) for TCP and UDP inside the named namespace and relays
// both to target on the host. Close stops it.
func ForwardIn(name, addr, target string) (*Forwarder, error) {
	return forwardIn(name, addr, target, true)
}

// ForwardTCPIn is ForwardIn for TCP alone, as an API server needs.
func ForwardTCPIn(name, addr, target string) (*Forwarder, error) {
	return forwardIn(name, addr, target, false)
}

func forwardIn(name, addr, target string, udp bool) (*Forwarder, error) {
	f := &Forwarder{}
	err := In(name, func() error {
		var err error
		if f.tcp, err = net.Listen("tcp", addr); err != nil || !udp {
			return err
		}
		f.udp, err = net.ListenPacket("udp", addr)
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("listening on %s in namespace %s: %w", addr, name, err), f.Close())
	}
	go serveTCP(f.tcp, target)
	if udp {
		go serveUDP(f.udp, target)
	}
	return f, nil
}

// Close stops its listeners; connections under way end with their peers.
func (f *Forwarder) Close() error {
	var errs []error
	if f.tcp != nil {
		errs = append(errs, f.tcp.Close())
	}
	if f.udp != nil {
		errs = append(errs, f.udp.Close())
	}
	return errors.Join(errs...)
}

func serveTCP(ln net.Listener, target string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		// Accepted sockets stay in the namespace; the dial runs on an ordinary thread, on the
		// host's network.
		go forward(in, target)
	}
}

// udpReplyWait bounds how long a relayed datagram waits for its answer: DNS clients retry
// after a few seconds anyway.
const udpReplyWait = 5 * time.Second

func serveUDP(pc net.PacketConn, target string) {
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			out, err := net.Dial("udp", target)
			if err != nil {
				return
			}
			defer out.Close()
			_ = out.SetDeadline(time.Now().Add(udpReplyWait))
			if _, err := out.Write(query); err != nil {
				return
			}
			reply := make([]byte, 65535)
			m, err := out.Read(reply)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(reply[:m], from)
		}()
	}
}

func forward(in net.Conn, addr string) {
	defer in.Close()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer out.Close()
	go func() {
		_, _ = io.Copy(out, in)
		if tcp, ok := out.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}()
	_, _ = io.Copy(in, out)
}

// DialIn connects to addr from inside the named namespace, as a process there would: the
// socket is made on a thread in the namespace and keeps it for its life.
func DialIn(name, network, addr string, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	err := In(name, func() error {
		var err error
		conn, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return conn, err
}
