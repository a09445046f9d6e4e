package classify

import (
	"cmp"
	"slices"

	"github.com/kestrelops/tandem/proxy/internal/jsonlex"
)

// canonical writes a valid JSON value as json.Marshal writes what
// json.Unmarshal decodes from it into an any: no spaces, numbers as
// float64, strings re-escaped, object members sorted by key and, of members
// with the same key, only the last.
//
// Arrays are written as they are read. Before it writes an object, it
// reads the object and the objects inside it once to plan the writing: the
// extent of each object with members, and its keys in the order they are
// written. Writing then follows the plan, so that each byte is read a
// bounded number of times however deep objects nest. The plan is sized by a
// count beforehand and costs 16 bytes an object and 4 a member. Offsets are
// int32: values are shorter than ParsePrompt's body limit.
type canonical struct {
	objects []object // objects with members, in the order of their opening braces
	// keys holds the offsets of member keys. While planning, the keys of
	// the objects still open grow from the front; an object's keys, once
	// sorted, move to the back, which grows towards the front.
	keys   []int32
	open   []int32 // containers open while planning: index in objects, or -1 for an array
	frames []frame // containers open while writing
}

type object struct {
	start, end int32 // offsets of the opening brace and just past the closing one
	first, n   int32 // its keys are keys[first:first+n]
}

type frame struct {
	object int32 // index in objects, or -1 for an array
	next   int32 // the member being written
}

// appendValue appends the canonical form of the valid JSON value v.
func (c *canonical) appendValue(dst, v []byte) []byte {
	frames := c.frames[:0]
	i := 0
value:
	for {
		switch v[i] {
		case '[', '{':
			opening := v[i]
			dst = append(dst, opening)
			if end := jsonlex.SkipSpace(v, i+1); v[end] == jsonlex.Closing(opening) {
				dst = append(dst, v[end])
				i = end + 1
				break
			}
			if opening == '[' {
				frames = append(frames, frame{object: -1})
				i = jsonlex.SkipSpace(v, i+1)
				continue value
			}
			if len(c.objects) == 0 {
				c.plan(v, i)
			}
			k := c.find(i)
			frames = append(frames, frame{object: k})
			dst, i = c.appendKey(dst, v, c.keys[c.objects[k].first])
			continue value
		case '"':
			end := jsonlex.StringEnd(v, i)
			dst = appendQuoted(dst, v[i:end])
			i = end
		case 't', 'f', 'n':
			end := skip(v, i)
			dst = append(dst, v[i:end]...)
			i = end
		default:
			end := jsonlex.NumberEnd(v, i)
			dst = appendNumber(dst, v[i:end])
			i = end
		}
		// After a value: the next element or member, or the container's end.
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			if f.object < 0 {
				if i = jsonlex.SkipSpace(v, i); v[i] == ',' {
					dst = append(dst, ',')
					i = jsonlex.SkipSpace(v, i+1)
					continue value
				}
				dst = append(dst, ']')
				i++
			} else {
				o := c.objects[f.object]
				if f.next++; f.next < o.n {
					dst = append(dst, ',')
					dst, i = c.appendKey(dst, v, c.keys[o.first+f.next])
					continue value
				}
				dst = append(dst, '}')
				i = int(o.end)
				c.endObject(f.object)
			}
			frames = frames[:len(frames)-1]
		}
		c.frames = frames
		return dst
	}
}

// appendKey appends the key at v[k] and a colon, and returns the offset of
// the member's value.
func (c *canonical) appendKey(dst, v []byte, k int32) ([]byte, int) {
	end := jsonlex.StringEnd(v, int(k))
	dst = appendQuoted(dst, v[k:end])
	return append(dst, ':'), jsonlex.SkipSpace(v, jsonlex.SkipSpace(v, end)+1)
}

// endObject forgets the plan once the object it was made for is written.
func (c *canonical) endObject(k int32) {
	if k == 0 {
		c.objects, c.keys = c.objects[:0], c.keys[:0]
	}
}

// find returns the index of the object that starts at v[start].
func (c *canonical) find(start int) int32 {
	k, _ := slices.BinarySearchFunc(c.objects, int32(start), func(o object, start int32) int {
		return cmp.Compare(o.start, start)
	})
	return int32(k)
}

// plan records the object at v[i] and the objects inside it.
func (c *canonical) plan(v []byte, i int) {
	objects, members, depth := count(v, i)
	c.objects = slices.Grow(c.objects[:0], objects)
	c.keys = slices.Grow(c.keys[:0], members)[:members]
	open := slices.Grow(c.open[:0], depth)
	pending, back := int32(0), int32(members)
	for {
		switch v[i] {
		case '[', '{':
			opening := v[i]
			if end := jsonlex.SkipSpace(v, i+1); v[end] == jsonlex.Closing(opening) {
				i = end + 1
				break
			}
			if opening == '[' {
				open = append(open, -1)
				i = jsonlex.SkipSpace(v, i+1)
				continue
			}
			open = append(open, int32(len(c.objects)))
			c.objects = append(c.objects, object{start: int32(i), first: pending})
			i = jsonlex.SkipSpace(v, i+1)
			c.keys[pending] = int32(i)
			pending++
			i = jsonlex.SkipSpace(v, jsonlex.MemberValue(v, i))
			continue
		default:
			i = skip(v, i)
		}
		// After a value: the next element or member, or the container's end.
		for ; len(open) > 0; open = open[:len(open)-1] {
			k := open[len(open)-1]
			if i = jsonlex.SkipSpace(v, i); v[i] == ',' {
				i = jsonlex.SkipSpace(v, i+1)
				if k >= 0 {
					c.keys[pending] = int32(i)
					pending++
					i = jsonlex.SkipSpace(v, jsonlex.MemberValue(v, i))
				}
				break
			}
			i++
			if k >= 0 {
				o := &c.objects[k]
				n := sortKeys(v, c.keys[o.first:pending])
				back -= n
				copy(c.keys[back:], c.keys[o.first:o.first+n])
				pending = o.first
				o.first, o.n, o.end = back, n, int32(i)
			}
		}
		if len(open) == 0 {
			c.open = open
			return
		}
	}
}

// sortKeys sorts the keys at the given offsets of v, as json.Marshal sorts
// a map's, and keeps the last of equal keys, as json.Unmarshal does. It
// returns how many it kept, at the front.
func sortKeys(v []byte, keys []int32) int32 {
	key := func(at int32) []byte { return v[at:jsonlex.StringEnd(v, int(at))] }
	slices.SortStableFunc(keys, func(a, b int32) int { return compareKeys(key(a), key(b)) })
	n := 0
	for j, at := range keys {
		if j+1 < len(keys) && compareKeys(key(at), key(keys[j+1])) == 0 {
			continue // a later member has the same key
		}
		keys[n] = at
		n++
	}
	return int32(n)
}

// count returns how many objects with members, and members, the valid JSON
// value at v[i] holds, and how deep it nests.
func count(v []byte, i int) (objects, members, depth int) {
	for open := 0; ; {
		switch v[i] {
		case '"':
			i = jsonlex.StringEnd(v, i)
			continue
		case '{':
			if v[jsonlex.SkipSpace(v, i+1)] != '}' {
				objects++
			}
			fallthrough
		case '[':
			open++
			depth = max(depth, open)
		case '}', ']':
			if open--; open == 0 {
				return objects, members, depth
			}
		case ':':
			members++
		}
		i++
	}
}
