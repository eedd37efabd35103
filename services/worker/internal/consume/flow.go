package consume

// pauseLocked pauses the fetching of each partition that holds its share of records that could
// start now (ps.ready holds exactly the sessions whose head record could start) or of records in
// all, and resumes the others. Shares rather than one bound for all partitions: with one bound, a
// single partition's fetched records could fill it, fetching would stop for every partition, and
// the others would have nothing to start while that partition's records were worked off.
func (c *Consumer) pauseLocked() {
	var pause, resume map[string][]int32
	for _, ps := range c.order {
		full := ps.ready >= c.bufferedShare || ps.held >= c.heldShare
		switch {
		case full && !ps.paused:
			pause = addPart(pause, ps.pk)
		case !full && ps.paused:
			resume = addPart(resume, ps.pk)
		default:
			continue
		}
		ps.paused = full
	}
	if c.client == nil {
		return
	}
	if pause != nil {
		c.client.PauseFetchPartitions(pause)
	}
	if resume != nil {
		c.client.ResumeFetchPartitions(resume)
	}
}

func addPart(m map[string][]int32, pk partKey) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[pk.topic] = append(m[pk.topic], pk.part)
	return m
}
