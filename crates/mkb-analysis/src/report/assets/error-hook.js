window.__mkbErrors=[];window.addEventListener('error',function(e){window.__mkbErrors.push(String(e.message||e));});
