package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where figures were measured; a figure means little without it.
type Machine struct {
	Cores      int
	GOMAXPROCS int
	// MemoryBytes is the physical memory; 0 when unknown.
	MemoryBytes uint64
	CPUModel    string
	GoVersion   string
	OSArch      string
	// LoadAverage is the 1-minute load average when the part started, which says how busy the
	// shared machine was; empty when unknown.
	LoadAverage string
}

// DescribeMachine reads the machine's description from the runtime and, on Linux, /proc.
func DescribeMachine() Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		OSArch:     runtime.GOOS + "/" + runtime.GOARCH,
		CPUModel:   "unknown",
	}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = v
	}
	if v, ok := procField("/proc/meminfo", "MemTotal"); ok {
		fields := strings.Fields(v)
		if len(fields) == 2 && fields[1] == "kB" {
			if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
				m.MemoryBytes = kb * 1024
			}
		}
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fields := strings.Fields(string(raw)); len(fields) > 0 {
			m.LoadAverage = fields[0]
		}
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(name) == key {
			value = strings.TrimSpace(value)
			return value, value != ""
		}
	}
	return "", false
}

// Table renders the machine as a one-row Markdown table.
func (m Machine) Table() Table {
	mem := "unknown"
	if m.MemoryBytes > 0 {
		mem = fmt.Sprintf("%.1f GiB", float64(m.MemoryBytes)/(1<<30))
	}
	load := m.LoadAverage
	if load == "" {
		load = "unknown"
	}
	return Table{
		Header: []string{"Cores", "GOMAXPROCS", "Memory", "CPU", "Go", "OS/arch", "Load average at start"},
		Rows: [][]string{{
			strconv.Itoa(m.Cores), strconv.Itoa(m.GOMAXPROCS), mem, m.CPUModel, m.GoVersion, m.OSArch, load,
		}},
	}
}
