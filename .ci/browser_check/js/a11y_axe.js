// axe-core's violations on the loaded page (axe.min.js is injected first), as
// [{id, nodes: [{target, link}]}]; ``link``: the element is or sits in a link. The rules: those
// a11y.py names, and every rule of its tags (WCAG 2 A and AA).
async ([rules, tags]) => {
  const all = new Set(rules.concat(axe.getRules(tags).map(r => r.ruleId)));
  const res = await axe.run(document, {
    runOnly: {type: 'rule', values: Array.from(all)},
    resultTypes: ['violations'],
  });
  return res.violations.map(v => ({
    id: v.id,
    nodes: v.nodes.map(n => {
      let el = null;
      try { el = document.querySelector(n.target[n.target.length - 1]); } catch (e) {}
      return {target: n.target.join(' '), link: !!(el && el.closest('a'))};
    }),
  }));
}
