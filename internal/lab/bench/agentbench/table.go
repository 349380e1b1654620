package agentbench

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// tableModel is an nftables table reduced to what both its spellings show the same way: the
// nft commands knftables writes (a dry-run dump, a transaction) and the kernel's JSON listing.
// nft prints rules in its own normalized syntax, so a rule is not compared as text but by its
// signature: the addresses it names and the chains and sets it refers to. Chains, their number
// of rules, sets and maps, and every set and map element are compared exactly.
type tableModel struct {
	// chains maps a chain name to its hook ("" for a regular chain).
	chains map[string]string
	// rules maps a chain name to its rules' signatures, in order.
	rules map[string][]string
	// sets maps a set or map name to "set" or "map".
	sets map[string]string
	// elements maps a set or map name to its elements, "key" or "key : value", in any order.
	elements map[string][]string
}

func newTableModel() *tableModel {
	return &tableModel{chains: map[string]string{}, rules: map[string][]string{}, sets: map[string]string{},
		elements: map[string][]string{}}
}

// counts of what the table holds, after dropping empty regular chains (see lines).
type tableCounts struct {
	Chains, Rules, Sets, Elements int
}

func (m *tableModel) counts() tableCounts {
	var c tableCounts
	for name, hook := range m.chains {
		if hook != "" || len(m.rules[name]) > 0 {
			c.Chains++
		}
		c.Rules += len(m.rules[name])
	}
	c.Sets = len(m.sets)
	for _, els := range m.elements {
		c.Elements += len(els)
	}
	return c
}

// lines is the table in a canonical, sorted form. Regular chains without rules are left out:
// the only ones are chains of removed Services, flushed and awaiting their delayed deletion
// (dataplane.Options.StaleChainDelay), which a freshly rendered table does not have.
func (m *tableModel) lines() []string {
	var out []string
	for name, hook := range m.chains {
		rules := m.rules[name]
		if hook == "" && len(rules) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("chain %s hook=%q rules=%d", name, hook, len(rules)))
		for i, sig := range rules {
			out = append(out, fmt.Sprintf("rule %s #%d: %s", name, i, sig))
		}
	}
	for name, kind := range m.sets {
		out = append(out, kind+" "+name)
	}
	for name, els := range m.elements {
		for _, e := range els {
			out = append(out, "element "+name+" { "+e+" }")
		}
	}
	slices.Sort(out)
	return out
}

// compareTables returns "" when got and want hold the same table, else what differs.
func compareTables(got, want *tableModel) string {
	g, w := got.lines(), want.lines()
	if slices.Equal(g, w) {
		return ""
	}
	missing, extra := sortedDifference(w, g), sortedDifference(g, w)
	gc, wc := got.counts(), want.counts()
	return fmt.Sprintf("table has %d chains, %d rules, %d sets, %d elements; the render %d, %d, %d, %d; "+
		"%d lines missing (first: %s), %d unexpected (first: %s)",
		gc.Chains, gc.Rules, gc.Sets, gc.Elements, wc.Chains, wc.Rules, wc.Sets, wc.Elements,
		len(missing), firstFew(missing), len(extra), firstFew(extra))
}

// sortedDifference returns the lines of a not in b, both sorted, counting repeats.
func sortedDifference(a, b []string) []string {
	var out []string
	j := 0
	for _, line := range a {
		for j < len(b) && b[j] < line {
			j++
		}
		if j < len(b) && b[j] == line {
			j++
			continue
		}
		out = append(out, line)
	}
	return out
}

func firstFew(lines []string) string {
	if len(lines) == 0 {
		return "none"
	}
	shown := lines[:min(len(lines), 3)]
	return strings.Join(shown, "; ")
}

var (
	ipv4Literal = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)
	jumpOrGoto  = regexp.MustCompile(`\b(jump|goto) ([^\s,{}]+)`)
	setRef      = regexp.MustCompile(`@[^\s,{}]+`)
	hookClause  = regexp.MustCompile(`\bhook (\S+)`)
)

// signature is a rule's addresses, jumps and set references, sorted: nft may print an inline
// map's entries in another order than they were written.
func signature(tokens []string) string {
	slices.Sort(tokens)
	return strings.Join(tokens, " ")
}

func textSignature(rule string) string {
	var tokens []string
	for _, m := range jumpOrGoto.FindAllStringSubmatch(rule, -1) {
		tokens = append(tokens, m[1]+" "+m[2])
	}
	tokens = append(tokens, setRef.FindAllString(rule, -1)...)
	// Chain and set names may contain an endpoint's address; only addresses outside them count,
	// as in the JSON, where names are strings of their own.
	bare := setRef.ReplaceAllString(jumpOrGoto.ReplaceAllString(rule, " "), " ")
	tokens = append(tokens, ipv4Literal.FindAllString(bare, -1)...)
	return signature(tokens)
}

// parseCommands reads nft commands as knftables writes them, for the table it names: a
// dry-run dump or the text of a full sync's transaction.
var elementComment = regexp.MustCompile(` comment "[^"]*"`)

func parseCommands(text string) (*tableModel, error) {
	m := newTableModel()
	for n, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			return nil, fmt.Errorf("line %d: cannot read %q", n+1, line)
		}
		verb, object := fields[0], fields[1]
		if object == "table" {
			if verb == "delete" {
				m = newTableModel()
			}
			continue
		}
		if verb != "add" || len(fields) < 5 {
			return nil, fmt.Errorf("line %d: only adds of whole objects are understood, not %q", n+1, line)
		}
		name, rest := fields[4], strings.Join(fields[5:], " ")
		switch object {
		case "chain":
			hook := ""
			if h := hookClause.FindStringSubmatch(rest); h != nil {
				hook = h[1]
			}
			m.chains[name] = hook
		case "rule":
			m.rules[name] = append(m.rules[name], textSignature(rest))
		case "set", "map":
			m.sets[name] = object
		case "element":
			body := strings.TrimSuffix(strings.TrimPrefix(rest, "{ "), " }")
			// A comment labels an element; the listing side keeps only keys and values too.
			body = elementComment.ReplaceAllString(body, "")
			m.elements[name] = append(m.elements[name], strings.Join(strings.Fields(body), " "))
		default:
			return nil, fmt.Errorf("line %d: unknown object %q", n+1, object)
		}
	}
	return m, nil
}

// parseListing reads `nft --json list table` output.
func parseListing(listing []byte) (*tableModel, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(listing, &doc); err != nil {
		return nil, fmt.Errorf("reading nft's JSON listing: %w", err)
	}
	m := newTableModel()
	for _, obj := range doc.Nftables {
		for kind, raw := range obj {
			if err := m.addListed(kind, raw); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *tableModel) addListed(kind string, raw json.RawMessage) error {
	switch kind {
	case "chain":
		var c struct{ Name, Hook string }
		if err := json.Unmarshal(raw, &c); err != nil {
			return err
		}
		m.chains[c.Name] = c.Hook
	case "rule":
		var r struct {
			Chain string
			Expr  any
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		var tokens []string
		collectTokens(r.Expr, &tokens)
		m.rules[r.Chain] = append(m.rules[r.Chain], signature(tokens))
	case "set", "map":
		var s struct {
			Name string
			Elem []any
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		m.sets[s.Name] = kind
		for _, e := range s.Elem {
			text, err := elementText(kind, e)
			if err != nil {
				return fmt.Errorf("%s %s: %w", kind, s.Name, err)
			}
			m.elements[s.Name] = append(m.elements[s.Name], text)
		}
	}
	return nil
}

// collectTokens walks a rule's JSON expressions for what textSignature finds in its text.
func collectTokens(v any, tokens *[]string) {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "@") {
			*tokens = append(*tokens, v)
		} else {
			// nft 1.0.6 lists a map update as its text ("update @m { ip saddr : ip daddr }").
			*tokens = append(*tokens, setRef.FindAllString(v, -1)...)
			*tokens = append(*tokens, ipv4Literal.FindAllString(setRef.ReplaceAllString(v, " "), -1)...)
		}
	case []any:
		for _, x := range v {
			collectTokens(x, tokens)
		}
	case map[string]any:
		for _, verdict := range []string{"jump", "goto"} {
			if t, ok := v[verdict].(map[string]any); ok {
				if target, ok := t["target"].(string); ok {
					*tokens = append(*tokens, verdict+" "+target)
				}
			}
		}
		for k, x := range v {
			if k != "jump" && k != "goto" {
				collectTokens(x, tokens)
			}
		}
	}
}

// elementText spells a listed element the way knftables writes it: "a . b" or "a . b : verdict".
func elementText(kind string, e any) (string, error) {
	if kind == "set" {
		return valueText(e)
	}
	pair, ok := e.([]any)
	if !ok || len(pair) != 2 {
		return "", fmt.Errorf("map element %v is not a key and a value", e)
	}
	key, err := valueText(pair[0])
	if err != nil {
		return "", err
	}
	value, err := valueText(pair[1])
	if err != nil {
		return "", err
	}
	return key + " : " + value, nil
}

func valueText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case map[string]any:
		if len(v) != 1 {
			break
		}
		for k, x := range v {
			switch k {
			case "concat":
				parts, _ := x.([]any)
				texts := make([]string, len(parts))
				for i, p := range parts {
					t, err := valueText(p)
					if err != nil {
						return "", err
					}
					texts[i] = t
				}
				return strings.Join(texts, " . "), nil
			case "prefix":
				p, _ := x.(map[string]any)
				addr, err := valueText(p["addr"])
				if err != nil {
					return "", err
				}
				bits, err := valueText(p["len"])
				return addr + "/" + bits, err
			case "elem":
				// An element with options (timeout, comment): only its value counts here.
				p, _ := x.(map[string]any)
				return valueText(p["val"])
			case "jump", "goto":
				t, _ := x.(map[string]any)
				target, _ := t["target"].(string)
				return k + " " + target, nil
			case "accept", "drop", "continue", "return":
				return k, nil
			}
		}
	}
	return "", fmt.Errorf("cannot spell element value %v", v)
}
