/*
 * The daemon's one list: intrusive, doubly linked, circular, with a
 * sentinel head. An object that goes on a list embeds a struct kp_list, its
 * link; the list's owner embeds another, the head, which belongs to no
 * object. KP_LIST_ENTRY (container_of) recovers the object from its link,
 * so an object may be on several lists at once through several links, and
 * nothing is ever allocated: putting an object on a list or taking it off
 * cannot fail.
 *
 * Why a sentinel head: the head is a link like any other, an empty list's
 * pointing at itself, so every link on a list has a real neighbour on each
 * side. Inserting and unlinking never test for NULL or for an end, and
 * unlinking needs the link alone, never the head: an object leaves its
 * list without knowing which list, or whose, it is on. The price is that a
 * head must be initialised (kp_list_init(), or KP_LIST_INIT for a static
 * one) before anything looks at it, since zeroed memory is not an empty
 * list, and must not be copied or moved while the list is in use: the
 * first and last links point at it.
 *
 * A link on no list has both pointers NULL. So zeroed memory (calloc,
 * slab_get, memset) is an unlinked link, "is it on a list?" is one test
 * (kp_list_linked), and unlinking a link that is on no list does nothing.
 *
 * Order is the caller's to keep: a list read "oldest first" takes new links
 * at its tail, one read "newest first" at its head; KP_LIST_FIRST is where
 * either is read from. The walks below visit links from first to last.
 */
#ifndef KP_LIST_H
#define KP_LIST_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>

/* The object that embeds member, from a pointer to that member. */
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* A head, or a link in an object: one type, so that the head stands in for either end. */
struct kp_list {
	struct kp_list *prev;   /* the link before; the first's is the head; NULL: on no list */
	struct kp_list *next;   /* the link after; the last's is the head; NULL: on no list */
};

/* An empty head, for a static one: static struct kp_list all = KP_LIST_INIT(all); */
#define KP_LIST_INIT(head) {&(head), &(head)}

static inline void
kp_list_init(struct kp_list *head)
{
	head->prev = head->next = head;
}

static inline bool
kp_list_empty(const struct kp_list *head)
{
	return head->next == head;
}

/* A link on no list, for memory that is not zeroed. */
static inline void
kp_list_init_link(struct kp_list *link)
{
	link->prev = link->next = NULL;
}

/* Is link on a list? */
static inline bool
kp_list_linked(const struct kp_list *link)
{
	return link->next != NULL;
}

/* Puts link, on no list, right after pos: the head (making it first) or a link on the list. */
static inline void
kp_list_insert_after(struct kp_list *pos, struct kp_list *link)
{
	assert(!kp_list_linked(link));
	link->prev = pos;
	link->next = pos->next;
	pos->next->prev = link;
	pos->next = link;
}

/* Puts link, on no list, right before pos: the head (making it last) or a link on the list. */
static inline void
kp_list_insert_before(struct kp_list *pos, struct kp_list *link)
{
	kp_list_insert_after(pos->prev, link);
}

static inline void
kp_list_insert_head(struct kp_list *head, struct kp_list *link)
{
	kp_list_insert_after(head, link);
}

static inline void
kp_list_insert_tail(struct kp_list *head, struct kp_list *link)
{
	kp_list_insert_before(head, link);
}

/* Takes link off its list and leaves it on none; a link on no list stays so. */
static inline void
kp_list_unlink(struct kp_list *link)
{
	if (!link->next)
		return;
	link->prev->next = link->next;
	link->next->prev = link->prev;
	link->prev = link->next = NULL;
}

/* The first and the last link, NULL when the list is empty. */
static inline struct kp_list *
kp_list_first(const struct kp_list *head)
{
	return head->next != head ? head->next : NULL;
}

static inline struct kp_list *
kp_list_last(const struct kp_list *head)
{
	return head->prev != head ? head->prev : NULL;
}

/*
 * The object of type whose link member is link. The _OR_NULL form takes
 * the list's head too and gives NULL for it: what a walk that came round
 * to the head, or the neighbour of an end, is. In this and the macros
 * below, head is evaluated more than once.
 */
#define KP_LIST_ENTRY(link, type, member) container_of(link, type, member)
#define KP_LIST_ENTRY_OR_NULL(link, head, type, member) \
	((link) == (head) ? NULL : KP_LIST_ENTRY(link, type, member))

/* The first and the last object on the list at head, NULL when it is empty. */
#define KP_LIST_FIRST(head, type, member) KP_LIST_ENTRY_OR_NULL((head)->next, head, type, member)
#define KP_LIST_LAST(head, type, member) KP_LIST_ENTRY_OR_NULL((head)->prev, head, type, member)

/*
 * for (type *var = each object on the list at head, first to last). The
 * body must not unlink var (KP_LIST_EACH_SAFE is for that); the step to
 * the next object reads var's link after the body has run.
 */
#define KP_LIST_EACH(var, head, type, member)                                      \
	for (type *var = KP_LIST_FIRST(head, type, member); var;                   \
	     var = KP_LIST_ENTRY_OR_NULL(var->member.next, head, type, member))

/*
 * The same, where the body may unlink (and free) var: tmp is the object
 * after it, taken before the body runs. The body must not unlink tmp.
 */
#define KP_LIST_EACH_SAFE(var, tmp, head, type, member)                                   \
	for (type *var = KP_LIST_FIRST(head, type, member),                               \
	          *tmp = var ? KP_LIST_ENTRY_OR_NULL(var->member.next, head, type, member) \
	                     : NULL;                                                      \
	     var; var = tmp,                                                              \
	          tmp = var ? KP_LIST_ENTRY_OR_NULL(var->member.next, head, type, member) \
	                    : NULL)

#endif
