/*
 * token.pml -- the generation rule: how the next token of a row is made.
 *
 * Abstracts dlock_token_rule in extension/token.c, which every grant of
 * every kind calls for the token it writes, from its row or from the reap
 * floor.
 *
 * The rule checked (default): a row whose last grant was in this cluster
 * moves up one generation per timeline switch since that grant (tl -
 * grant_timeline); a row last granted in another cluster (restored from a
 * dump, or carried over by pg_upgrade, both of which start again on timeline
 * 1) counts as granted on timeline 0 of this one: it moves up tl generations.
 * A timeline that differs from the row's therefore always raises the
 * generation, and by an amount that grows with the timeline, so a promoted
 * standby is above everything its primary issued after the promotion point.
 * A new name (or one that comes back after reap) takes the same rule from the
 * floor, which records the grant_timeline and cluster of the reaped row.
 *
 * Variants (spin -D...), each a known bug that spin must reject:
 *   RULE_GREATER       1.0: raise only when tl > grant_timeline; new names
 *                      from the floor by FIRST_TOKEN of 1.0
 *   RULE_TIMELINE_ONLY raise whenever tl differs, by tl - grant_timeline
 *                      when greater and by tl when smaller, but with no
 *                      notion of cluster: a restored row whose
 *                      grant_timeline equals a later timeline of the new
 *                      cluster is taken for "same timeline"
 *   BUG_SEQUENCE       tokens from one global sequence (nextval), timeline
 *                      ignored; server.pml advances it with the grant
 *
 * FENCED: each timeline above stands for its position, GRANT_POS
 * (state.pml): one generation up per epoch moved, EPW per timeline, so a
 * grant after a crash lands above the grants the crash lost, and a promoted
 * standby still above a primary whose epoch moves it missed.
 *
 * The reap floor is a state like a row's (server.pml stmt_reap): a new
 * name takes the floor's next token by the same rule, so the floor moves
 * with every later epoch and timeline. A floor without a position (gsys 0:
 * the carry-over of DROP EXTENSION, environment.pml) moves up by the whole
 * position.
 *
 *   BUG_FLOOR_PLUS_ONE  1.4's dlock_first_token (finding 1): floor + 1
 *                       whenever the floor's generation is at or above the
 *                       position, so a new name's first grant lost by a
 *                       crash above a high floor is issued again
 */

/* generation xout for the next grant of a state (generation xg,
 * grant_timeline xtl, cluster xsys: a row, or the reap floor) at position xpos on the
 * server pri (token.c dlock_token_rule) */
inline next_gen_at(xg, xtl, xsys, xpos, xout)
{
#if defined(RULE_GREATER)
	if
	:: xpos > xtl -> xout = xg + xpos - xtl
	:: else -> xout = xg
	fi
#elif defined(RULE_TIMELINE_ONLY)
	if
	:: xpos > xtl -> xout = xg + xpos - xtl
	:: xpos < xtl -> xout = xg + xpos
	:: else -> xout = xg
	fi
#else
	if
	:: xsys != 0 && xsys == pri.sys && xpos >= xtl -> xout = xg + xpos - xtl
	:: else -> xout = xg + xpos	/* another cluster, unknown history (0), or two servers on one timeline */
	fi
#endif
}

/* generation for a grant made now */
inline next_gen(rg, rtl, rsys, ng)
{
	next_gen_at(rg, rtl, rsys, GRANT_POS, ng)
}

/* token of a new lease on the row of name n: (ng, nc) */
inline token_for_row(n, ng, nc)
{
#ifdef BUG_SEQUENCE
	ng = 1; nc = pri.seq + 1
#else
	next_gen(pri.row[n].gen, pri.row[n].gtl, pri.row[n].gsys, ng);
	nc = pri.row[n].cnt + 1
#endif
}

/* token of the first lease of a name, from the reap floor */
inline token_for_new_name(ng, nc)
{
#if defined(BUG_SEQUENCE)
	ng = 1; nc = pri.seq + 1
#elif defined(RULE_GREATER) || defined(RULE_TIMELINE_ONLY)
	/* FIRST_TOKEN of 1.0: the floor's generation if at least tl, else tl */
	if
	:: pri.floor.gen >= GRANT_POS -> ng = pri.floor.gen
	:: else -> ng = GRANT_POS
	fi;
	nc = pri.floor.cnt + 1
#elif defined(BUG_FLOOR_PLUS_ONE)
	/* dlock_first_token of 1.4: floor + 1 once the floor's generation is
	 * at or above the position, whatever epoch the floor was left in */
	if
	:: pri.floor.gen >= GRANT_POS -> ng = pri.floor.gen
	:: else -> ng = GRANT_POS
	fi;
	nc = pri.floor.cnt + 1
#else
	next_gen(pri.floor.gen, pri.floor.gtl, pri.floor.gsys, ng);
	nc = pri.floor.cnt + 1
#endif
}
