// The drawer: at desktop width the primary sidebar is shown and its toggle hides it; below,
// the toggle opens it as a dialog. Either way its links are counted where they are visible.
// With no argument, the sidebar's state; with one, whether the state it names holds
// ('closed', 'hidden', 'shown', 'open'), for wait_for_function.
(want) => {
  const dialog = document.querySelector('#pst-primary-sidebar-modal');
  const holder = dialog && dialog.open ? dialog : document.querySelector('#pst-primary-sidebar');
  const r = holder ? holder.getBoundingClientRect() : {width: 0, height: 0};
  const st = holder ? getComputedStyle(holder) : {visibility: 'hidden'};
  const shown = r.width > 0 && r.height > 0 && st.visibility !== 'hidden';
  const s = {dialog: !!(dialog && dialog.open), shown,
             hidden: document.querySelector('#pst-primary-sidebar').classList.contains(
               'pst-sidebar-hidden'),
             links: shown ? Array.from(holder.querySelectorAll('nav a[href]')).map(a => a.href)
                          : []};
  if (want === undefined || want === null) return s;
  return {closed: !s.dialog, hidden: s.hidden && !s.shown, shown: s.shown,
          open: s.dialog && s.links.length > 0}[want];
}
