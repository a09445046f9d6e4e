package sim

// vocabulary is the words output text is made of.
var vocabulary = func() []string {
	onsets := []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"}
	vowels := []string{"a", "e", "i", "o", "u"}
	var words []string
	for _, o1 := range onsets {
		for _, v1 := range vowels {
			for _, o2 := range onsets {
				for _, v2 := range vowels[:2] {
					words = append(words, o1+v1+o2+v2)
				}
			}
		}
	}
	return words
}()
